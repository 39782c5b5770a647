"""``python -m archfit``: the ``archfit`` command."""

from archfit.cli import main

if __name__ == "__main__":
    main()
