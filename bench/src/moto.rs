//! A moto server of one benchmark run: `.venv/bin/moto_server` on a free loopback
//! port, stopped when dropped. moto keeps every item and message it ever saw in one
//! Python process (a 1,000-turn full-history run grows it by gigabytes), so a long
//! comparison gives each strategy its own and the memory goes with the run.

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
    /// Starts `moto_server` from the repository's `.venv` (made by `infra/setup.sh`)
    /// and waits until it answers.
    pub async fn start() -> Result<PrivateMoto, String> {
        let server = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/moto_server");
        if !server.exists() {
            return Err(format!(
                "{} is missing: run `bash infra/setup.sh` first",
                server.display()
            ));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let child = Command::new(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start {}: {e}", server.display()))?;
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
