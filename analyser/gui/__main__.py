"""``python -m analyser.gui [FILE...]``."""

import sys

from analyser.gui.app import main

sys.exit(main())
