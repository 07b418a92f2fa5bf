"""recio's command line (installed as the package ``recio.cli``): a thin click layer."""
