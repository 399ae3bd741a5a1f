"""One module per `tokenlens` subcommand; each exposes `register(subparsers)`."""
