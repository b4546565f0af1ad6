//! offload-capture: placeholder, filled in by its own change.
