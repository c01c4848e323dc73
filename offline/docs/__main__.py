import sys

from offline.docs.generate import main

sys.exit(main())
