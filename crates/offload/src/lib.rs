//! offload engine
