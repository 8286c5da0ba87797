"""`python -m crux.serve`: run the HTTP API and the codec server."""

import sys

from crux.serve._command import main

if __name__ == "__main__":
    sys.exit(main())
