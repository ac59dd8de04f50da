from fmcluster.cli import main

raise SystemExit(main())
