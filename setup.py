"""recio: read, write, split, inspect and pack MXNet/dmlc RecordIO files without MXNet."""
import os

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
    LONG_DESCRIPTION = f.read()

setup(
    name="recio",
    version="0.1.0",
    description="RecordIO (.rec/.idx/.lst) toolkit and im2rec packer, no MXNet needed",
    long_description=LONG_DESCRIPTION,
    long_description_content_type="text/markdown",
    python_requires=">=3.8",
    packages=["recio", "recio_cli"],
    # the click layer lives in cli/ but installs as recio_cli: no top-level "cli" package
    package_dir={"recio": "recio", "recio_cli": "cli"},
    install_requires=["click>=8.0", "pillow>=9.0", "numpy>=1.21", "tqdm>=4.60"],
    extras_require={
        "dev": ["pytest>=7", "hypothesis>=6"],
        "torch": ["torch>=1.12"],
        # scaled JPEG decoding (simplejpeg) and OpenCV's resize, used automatically when present
        "fast": ["simplejpeg>=1.6", "opencv-python-headless>=4.5"],
    },
    entry_points={
        "console_scripts": [
            "recio=recio_cli.main:main",
            "im2rec=recio_cli.im2rec:main",
        ]
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
