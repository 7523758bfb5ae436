import sys

from lengen_core.serving.cli import main

sys.exit(main())
