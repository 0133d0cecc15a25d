import sys

from autoscaler.app.cli import main

sys.exit(main())
