"""`python -m memoryscope.cli`: the `memoryscope` command."""

import sys

from memoryscope.cli import main

sys.exit(main())
