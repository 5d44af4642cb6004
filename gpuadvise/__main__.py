from __future__ import annotations

from gpuadvise.cli import main

if __name__ == "__main__":
    main()
