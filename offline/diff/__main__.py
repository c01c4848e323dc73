import sys

from offline.diff.compare import main

sys.exit(main())
