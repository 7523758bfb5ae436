import sys

from lengen.cli import main

sys.exit(main())
