"""``python -m dataclean``: the ``dataclean`` command, for an environment whose scripts folder is not on PATH
(or to pick the interpreter explicitly)."""
from dataclean.cli import main

if __name__ == "__main__":
    main(prog_name="dataclean")
