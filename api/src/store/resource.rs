//! The trait of every type stored as one [`Kind`]: kept apart from the
//! typed reads and writes ([`super::typed`]) so that the types can name it
//! from below them.

use serde::{Serialize, de::DeserializeOwned};

use crate::kind::Kind;

/// A type stored in the datastore as one [`Kind`].
pub trait Resource:
    ::kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Send + Sync + 'static
{
    const KIND: Kind;
}
