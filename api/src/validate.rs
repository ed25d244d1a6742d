//! Checks on objects before they are stored, with messages a person can act
//! on: which object, which field, what is wrong, what is allowed.

use std::fmt;

use kube::core::DynamicObject;

/// One or more problems with one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// `IPPool "pool-a"` or `NetworkPolicy default/allow-dns`.
    pub object: String,
    /// Each problem: (field path, what is wrong and what is allowed).
    pub problems: Vec<(String, String)>,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is invalid: ", self.object)?;
        for (i, (field, why)) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{field}: {why}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Invalid {}

/// Validate an object in its stored shape.
pub fn validate(_obj: &DynamicObject) -> Result<(), Invalid> {
    Ok(())
}
