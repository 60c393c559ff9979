//! A DNS server on 127.0.0.1 that answers TXT queries from a table the test fills, so the
//! sending-domain checks run against real DNS over UDP without the internet.

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::TXT;
use hickory_proto::rr::{RData, Record, RecordType};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::UdpSocket;

#[derive(Clone)]
pub struct TestDns {
    pub addr: SocketAddr,
    records: Arc<Mutex<HashMap<String, Vec<String>>>>,
}

impl TestDns {
    pub async fn start() -> anyhow::Result<Self> {
        let socket = UdpSocket::bind("127.0.0.1:0").await?;
        let addr = socket.local_addr()?;
        let records: Arc<Mutex<HashMap<String, Vec<String>>>> = Arc::default();
        let table = records.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok((n, from)) = socket.recv_from(&mut buf).await {
                let Ok(query) = Message::from_vec(&buf[..n]) else { continue };
                let Some(reply) = answer(&query, &table) else { continue };
                let _ = socket.send_to(&reply, from).await;
            }
        });
        Ok(Self { addr, records })
    }

    /// Publishes `values` as the TXT records at `host` (replacing what was there); none removes
    /// the name.
    pub fn set(&self, host: &str, values: &[&str]) {
        let mut table = self.records.lock().expect("dns table");
        if values.is_empty() {
            table.remove(&host.to_ascii_lowercase());
        } else {
            table.insert(host.to_ascii_lowercase(), values.iter().map(|v| v.to_string()).collect());
        }
    }
}

fn answer(query: &Message, table: &Mutex<HashMap<String, Vec<String>>>) -> Option<Vec<u8>> {
    let q = query.queries.first()?.clone();
    let mut reply = Message::new(query.metadata.id, MessageType::Response, OpCode::Query);
    reply.metadata.recursion_desired = query.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.metadata.authoritative = true;
    reply.add_query(q.clone());
    let host = q.name().to_ascii().trim_end_matches('.').to_ascii_lowercase();
    let found = table.lock().ok()?.get(&host).cloned();
    match found {
        Some(values) if q.query_type() == RecordType::TXT => {
            for value in values {
                // A TXT string holds at most 255 bytes; longer values (DKIM keys) are split.
                let chunks: Vec<String> =
                    value.as_bytes().chunks(255).map(|c| String::from_utf8_lossy(c).into_owned()).collect();
                reply.add_answer(Record::from_rdata(q.name().clone(), 60, RData::TXT(TXT::new(chunks))));
            }
        }
        Some(_) => {}
        None => reply.metadata.response_code = ResponseCode::NXDomain,
    }
    reply.to_vec().ok()
}
