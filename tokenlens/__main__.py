from tokenlens.cli import main

raise SystemExit(main())
