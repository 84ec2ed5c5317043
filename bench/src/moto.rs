//! A moto server of one benchmark run: `infra/moto_server.py` (moto's server
//! without its instance tracker, which would keep a copy of every item each query
//! returned) on a free loopback port, stopped when dropped. Each strategy gets its
//! own, so that runs share nothing but the machine.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running moto server; killed on drop.
#[derive(Debug)]
pub struct PrivateMoto {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl PrivateMoto {
    /// Starts `infra/moto_server.py` with the repository's `.venv` (made by
    /// `infra/setup.sh`) and waits until it answers.
    pub async fn start() -> Result<PrivateMoto, String> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let python = root.join(".venv/bin/python");
        if !python.exists() {
            return Err(format!(
                "{} is missing: run `bash infra/setup.sh` first",
                python.display()
            ));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let child = Command::new(&python)
            .arg(root.join("infra/moto_server.py"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start {}: {e}", python.display()))?;
        let moto = PrivateMoto {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let probe = client
                .get(format!("{}/moto-api/", moto.url))
                .timeout(Duration::from_secs(1))
                .send()
                .await;
            if probe.is_ok() {
                return Ok(moto);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("moto on {} did not answer within 30 s", moto.url))
    }
}

impl Drop for PrivateMoto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
