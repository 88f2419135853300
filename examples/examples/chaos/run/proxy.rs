//! The network mode's user-space proxy (the kernel has no netem): one listener per broker on
//! the orchestrator's bridge address; every member namespace redirects (nftables DNAT) its
//! connections to a broker's PLAINTEXT port through it. A slow fault delays every chunk a
//! broker sends to the target member; a stall fault holds a connection half-way through a
//! response until the heal.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// What the proxy does to one member's connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slow {
    /// Every chunk from a broker waits this long.
    Delay(Duration),
    /// The next chunk from a broker is cut in two and its second half held until the heal.
    Stall,
}

/// The proxy's shared state: member address to its treatment.
#[derive(Clone, Default)]
pub struct Proxy {
    faults: Arc<Mutex<HashMap<IpAddr, Slow>>>,
}

impl Proxy {
    /// Starts a listener on `listen_ip` (port chosen by the kernel) for each broker address;
    /// returns (broker address, the proxy's port) pairs.
    pub fn start(&self, listen_ip: &str, brokers: &[String]) -> Result<Vec<(String, u16)>, String> {
        let mut ports = Vec::new();
        for broker in brokers {
            let listener = TcpListener::bind((listen_ip, 0))
                .map_err(|e| format!("the proxy cannot listen on {listen_ip}: {e}"))?;
            let port = listener
                .local_addr()
                .map_err(|e| format!("the proxy's address: {e}"))?
                .port();
            let upstream = broker.clone();
            let faults = self.faults.clone();
            thread::spawn(move || {
                for client in listener.incoming().map_while(Result::ok) {
                    let upstream = upstream.clone();
                    let faults = faults.clone();
                    thread::spawn(move || {
                        let _ = serve(client, &upstream, faults);
                    });
                }
            });
            ports.push((broker.clone(), port));
        }
        Ok(ports)
    }

    pub fn set(&self, member: IpAddr, slow: Slow) {
        if let Ok(mut f) = self.faults.lock() {
            f.insert(member, slow);
        }
    }

    pub fn clear(&self) {
        if let Ok(mut f) = self.faults.lock() {
            f.clear();
        }
    }
}

fn serve(
    client: TcpStream,
    upstream: &str,
    faults: Arc<Mutex<HashMap<IpAddr, Slow>>>,
) -> std::io::Result<()> {
    let member = client.peer_addr()?.ip();
    let server = TcpStream::connect(upstream)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (mut c_read, mut s_write) = (client.try_clone()?, server.try_clone()?);
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = c_read.read(&mut buf) {
            if n == 0 || s_write.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = s_write.shutdown(Shutdown::Write);
    });
    let (mut s_read, mut c_write) = (server, client);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = s_read.read(&mut buf)?;
        if n == 0 {
            let _ = c_write.shutdown(Shutdown::Write);
            return Ok(());
        }
        let now = faults.lock().ok().and_then(|f| f.get(&member).copied());
        match now {
            None => c_write.write_all(&buf[..n])?,
            Some(Slow::Delay(d)) => {
                thread::sleep(d);
                c_write.write_all(&buf[..n])?;
            }
            Some(Slow::Stall) => {
                let half = n / 2;
                c_write.write_all(&buf[..half])?;
                while faults.lock().is_ok_and(|f| f.contains_key(&member)) {
                    thread::sleep(Duration::from_millis(50));
                }
                c_write.write_all(&buf[half..n])?;
            }
        }
    }
}
