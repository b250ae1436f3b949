import sys

from autotune import stopping

stopping.install(process=True)  # before the command line's imports: a signal while they load stops the same way
try:
    from autotune.cli.main import main
except KeyboardInterrupt:
    sys.stderr.write("interrupted\n")
    sys.exit(130)

main()
