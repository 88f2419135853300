//! A TCP proxy in front of a broker that can hold back the broker's answers to one kind of
//! request (by API key) for longer than the client's request timeout: the request reaches the
//! broker and takes effect, and the client does not learn it in time.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// EndTxn's API key.
pub const END_TXN: i16 = 26;

#[derive(Default)]
struct Hold {
    api_key: i16,
    remaining: usize,
    delay: Duration,
}

/// The proxy; it runs until the test process ends.
pub struct Proxy {
    /// `127.0.0.1:PORT` to connect to instead of the broker.
    pub addr: String,
    hold: Arc<Mutex<Hold>>,
    held: Arc<AtomicUsize>,
    forwarded: Arc<Mutex<Vec<i16>>>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards every connection to `target`.
    pub fn start(target: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let addr = listener.local_addr().expect("local address").to_string();
        let proxy = Proxy {
            addr,
            hold: Arc::default(),
            held: Arc::default(),
            forwarded: Arc::default(),
        };
        let (hold, held, forwarded) = (
            proxy.hold.clone(),
            proxy.held.clone(),
            proxy.forwarded.clone(),
        );
        let target = target.to_owned();
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let pending: Arc<Mutex<VecDeque<i16>>> = Arc::default();
                let (c2, s2) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                let (p1, p2, f1) = (pending.clone(), pending, forwarded.clone());
                thread::spawn(move || requests(client, server, p1, f1));
                let (h, n) = (hold.clone(), held.clone());
                thread::spawn(move || responses(s2, c2, p2, h, n));
            }
        });
        proxy
    }

    /// Holds the broker's next `count` answers to requests with `api_key` for `delay` each
    /// (then drops that connection: the client gave up on it).
    pub fn hold_next(&self, api_key: i16, count: usize, delay: Duration) {
        *self.hold.lock().expect("hold") = Hold {
            api_key,
            remaining: count,
            delay,
        };
    }

    /// How many answers were held so far.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// How many requests with `api_key` went through.
    pub fn forwarded(&self, api_key: i16) -> usize {
        self.forwarded
            .lock()
            .expect("forwarded")
            .iter()
            .filter(|k| **k == api_key)
            .count()
    }
}

fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let n = usize::try_from(i32::from_be_bytes(len)).ok()?;
    let mut frame = vec![0u8; 4 + n];
    frame[..4].copy_from_slice(&len);
    s.read_exact(&mut frame[4..]).ok()?;
    Some(frame)
}

fn requests(
    mut client: TcpStream,
    mut server: TcpStream,
    pending: Arc<Mutex<VecDeque<i16>>>,
    forwarded: Arc<Mutex<Vec<i16>>>,
) {
    while let Some(frame) = read_frame(&mut client) {
        let api_key = i16::from_be_bytes([frame[4], frame[5]]);
        pending.lock().expect("pending").push_back(api_key);
        forwarded.lock().expect("forwarded").push(api_key);
        if server.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = server.shutdown(Shutdown::Both);
}

fn responses(
    mut server: TcpStream,
    mut client: TcpStream,
    pending: Arc<Mutex<VecDeque<i16>>>,
    hold: Arc<Mutex<Hold>>,
    held: Arc<AtomicUsize>,
) {
    // Answers come back in request order on one connection.
    while let Some(frame) = read_frame(&mut server) {
        let api_key = pending.lock().expect("pending").pop_front();
        let delay = {
            let mut h = hold.lock().expect("hold");
            if api_key == Some(h.api_key) && h.remaining > 0 {
                h.remaining -= 1;
                Some(h.delay)
            } else {
                None
            }
        };
        if let Some(delay) = delay {
            held.fetch_add(1, Ordering::SeqCst);
            thread::sleep(delay);
            break;
        }
        if client.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}
