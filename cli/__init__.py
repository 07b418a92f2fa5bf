"""recio's command line (installed as the package ``recio_cli``): a thin click layer."""
