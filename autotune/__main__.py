from autotune.cli.main import main

main()
