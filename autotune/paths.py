"""Where the project's data folders are: next to the package in a checkout."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS_DIR = ROOT / "kernels_src"
SPACES_DIR = ROOT / "spaces"
RESULTS_DIR = ROOT / "results"
CONFIGS_DIR = ROOT / "configs"
