"""The ground floor: what every layer may import (errors, waiting, lab paths, the C build,
statistics), importing nothing of the harness above it."""
