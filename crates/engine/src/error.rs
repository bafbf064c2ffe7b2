//! Engine errors: each names the node, value or input it is about.

/// Why a model could not be prepared or run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A node has no kernel, no model-local function and no schema function body.
    #[error("node '{node}': unsupported: {op} v{version}{detail}")]
    Unsupported {
        node: String,
        op: String,
        version: i64,
        /// Extra context (e.g. " in domain 'com.example'"); may be empty.
        detail: String,
    },
    /// An initializer could not be decoded.
    #[error("initializer '{name}': {reason}")]
    Initializer { name: String, reason: String },
    /// A model input is missing, unknown, or does not match its declared type.
    #[error("input '{name}': {reason}")]
    Input { name: String, reason: String },
    /// A node failed while running.
    #[error("node '{node}' ({op}): {reason}")]
    Node {
        node: String,
        op: String,
        reason: String,
    },
    /// The graph itself is malformed (a value used before it is produced, a cycle, ...).
    #[error("graph '{graph}': {reason}")]
    Graph { graph: String, reason: String },
}
