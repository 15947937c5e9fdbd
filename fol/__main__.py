"""``python -m fol ...``: the ``fol`` command, for an environment whose scripts folder is not on PATH."""

if __name__ == "__main__":
    import sys

    from fol.cli import main

    sys.exit(main())
