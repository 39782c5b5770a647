from archfit.cli import main

main()
