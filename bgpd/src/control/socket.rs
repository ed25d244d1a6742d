//! Getting a Unix socket path ready to bind: parent directory, stale file.
use super::ControlError;
use std::fs::{DirBuilder, Permissions};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::Path;
use tokio::net::{UnixListener, UnixStream};

/// Binds `path` with mode 0660, creating its parent (mode 0755) if missing
/// and removing a socket file left behind by a previous run.
pub(super) async fn bind(path: &Path) -> Result<UnixListener, ControlError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|source| ControlError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
    }
    remove_stale(path).await?;
    let socket_err = |source| ControlError::Socket {
        path: path.to_owned(),
        source,
    };
    let listener = UnixListener::bind(path).map_err(socket_err)?;
    // Between bind and chmod the socket has the umask's mode; nobody can
    // have connected usefully yet since we do not accept before this.
    std::fs::set_permissions(path, Permissions::from_mode(0o660)).map_err(socket_err)?;
    Ok(listener)
}

async fn remove_stale(path: &Path) -> Result<(), ControlError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(ControlError::Socket {
                path: path.to_owned(),
                source,
            });
        }
    };
    if !meta.file_type().is_socket() {
        return Err(ControlError::NotASocket {
            path: path.to_owned(),
        });
    }
    // A socket someone still accepts on belongs to a running daemon.
    if UnixStream::connect(path).await.is_ok() {
        return Err(ControlError::InUse {
            path: path.to_owned(),
        });
    }
    tracing::debug!(path = %path.display(), "removing stale control socket");
    std::fs::remove_file(path).map_err(|source| ControlError::Socket {
        path: path.to_owned(),
        source,
    })
}
