import sys

from lengen_core.cli import main

sys.exit(main())
