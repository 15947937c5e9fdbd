"""The crash-safe writer, as the learning side imports it.

It lives in :mod:`swarmbase.fileio` (the dependency-free bottom layer) so that
``contact_sim`` writes its tables through the same mechanism without importing
``fol``; this module only re-exports it.
"""

from __future__ import annotations

from swarmbase.fileio import (
    atomic_write_bytes, atomic_write_text, atomic_writer, check_input_dir, check_output_dir, check_output_file,
    file_sha256, fsync_dir, is_temporary, make_dirs, publish_gate, remove_path, remove_temporaries, staged_outputs,
    write_json_atomic,
)

__all__ = ["fsync_dir", "make_dirs", "atomic_writer", "atomic_write_bytes", "atomic_write_text", "write_json_atomic",
           "staged_outputs", "check_input_dir", "check_output_dir", "check_output_file", "publish_gate",
           "is_temporary", "remove_temporaries", "remove_path", "file_sha256"]
