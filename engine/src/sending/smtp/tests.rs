use super::*;
use herald_devtools::smtp_sink::{FaultAction, FaultRule, Faults, MailSink};
use std::time::Instant;

const FROM: &str = "bounces@herald.test";

async fn sink() -> anyhow::Result<(MailSink, SmtpServer)> {
    let (sink, addr) = MailSink::start("127.0.0.1:0").await?;
    Ok((sink, SmtpServer::parse(&format!("smtp://{addr}"))?))
}

async fn connect(server: &SmtpServer) -> anyhow::Result<SmtpConnection> {
    Ok(SmtpConnection::connect(server, Duration::from_secs(5)).await?)
}

/// A ~2 KB message with a unique Message-ID.
fn message(n: usize, to: &str) -> Vec<u8> {
    herald_devtools::blast::sample_message(FROM, n, to)
}

/// Sends one message on a fresh connection and returns the error.
async fn fails(server: &SmtpServer, to: &str) -> anyhow::Result<SmtpError> {
    let mut conn = connect(server).await?;
    match conn.send(FROM, to, &message(0, to)).await {
        Ok(reply) => anyhow::bail!("{to} was accepted: {reply}"),
        Err(e) => Ok(e),
    }
}

#[test]
fn smtp_urls_parse_like_lettre() -> anyhow::Result<()> {
    let s = SmtpServer::parse("smtp://mx.example.com")?;
    assert_eq!((s.host.as_str(), s.port, s.tls, s.credentials.clone()), ("mx.example.com", 25, TlsMode::None, None));
    let s = SmtpServer::parse("smtp://us%40er:p%40ss%3Aw%2Fd@relay.example:2587?tls=required")?;
    assert_eq!((s.port, s.tls), (2587, TlsMode::StartTls));
    assert_eq!(s.credentials, Some(("us@er".to_string(), "p@ss:w/d".to_string())));
    assert!(!format!("{s:?}").contains("p@ss"), "Debug shows the password: {s:?}");
    assert!(!format!("{s:?}").contains("p%40ss"));
    let s = SmtpServer::parse("smtp://relay.example?tls=opportunistic")?;
    assert_eq!((s.port, s.tls), (587, TlsMode::Opportunistic));
    let s = SmtpServer::parse("smtps://u:p@[::1]/client.herald.test")?;
    assert_eq!(
        (s.host.as_str(), s.port, s.tls, s.helo.as_str()),
        ("::1", 465, TlsMode::Implicit, "client.herald.test")
    );
    assert!(!SmtpServer::parse("smtp://localhost")?.helo.is_empty());
    for bad in ["http://x", "smtp://x?tls=maybe", "not a url", "smtp://"] {
        assert!(SmtpServer::parse(bad).is_err(), "{bad} parsed");
    }
    let e = SmtpServer::parse("ftp://user:hunter2@x").err().map(|e| e.to_string()).unwrap_or_default();
    assert!(!e.is_empty() && !e.contains("hunter2"), "{e}");
    Ok(())
}

#[test]
fn smtp_replies_are_classified() {
    use SmtpErrorKind::*;
    use SmtpStage::*;
    let cases = [
        (421, "4.3.2 Service shutting down", RcptTo, Transient),
        (450, "4.2.1 Mailbox busy", RcptTo, Transient),
        (451, "4.3.0 Try again later", Data, Transient),
        (550, "5.1.1 User unknown", RcptTo, HardBounce),
        (550, "5.1.10 Recipient address has null MX", RcptTo, HardBounce),
        (550, "5.1.2 Bad destination system", RcptTo, HardBounce),
        (553, "5.1.3 Bad address syntax", RcptTo, HardBounce),
        (550, "Requested action not taken: mailbox unavailable", RcptTo, HardBounce),
        (550, "sorry, no such user here", RcptTo, HardBounce),
        (551, "User does not exist", RcptTo, HardBounce),
        (550, "5.7.1 mailbox unavailable: blocked for spam", RcptTo, Permanent),
        (554, "5.7.1 Relay access denied", RcptTo, Permanent),
        (552, "5.2.2 Mailbox full", RcptTo, Permanent),
        (550, "5.1.1 User unknown", MailFrom, Permanent),
        (550, "5.1.1 User unknown", Data, HardBounce),
        (550, "no such user", Data, Permanent),
        (554, "5.6.0 Message rejected", Data, Permanent),
    ];
    for (code, text, stage, want) in cases {
        assert_eq!(classify(code, text, stage), want, "{code} {text} at {stage}");
    }
}

#[tokio::test]
async fn smtp_client_delivers_a_raw_message() -> anyhow::Result<()> {
    let (sink, server) = sink().await?;
    let mut conn = connect(&server).await?;
    assert!(conn.greeting().starts_with("220 herald-dev-catcher"), "{}", conn.greeting());
    assert!(conn.greeting().contains("250-8BITMIME"), "{}", conn.greeting());
    assert!(!conn.is_encrypted());
    // Bare LFs, lines starting with dots, a lone dot line, 8-bit text, a final CRLF.
    let raw = "Subject: dots\nMessage-ID: <x1@herald.test>\n\n.\n..two\r\n.\r\nünïcode\r\nend\r\n";
    let reply = conn.send(FROM, "Reader@Example.com", raw.as_bytes()).await?;
    assert!(reply.starts_with("2.0.0 OK queued as"), "{reply}");
    let got = sink.wait_for_recipient("reader@example.com", Duration::from_secs(5)).await;
    let got = got.ok_or_else(|| anyhow::anyhow!("no mail arrived"))?;
    assert_eq!(String::from_utf8(got.raw)?, raw.replace("\r\n", "\n").replace('\n', "\r\n"));
    assert_eq!(got.mail_from, FROM);
    // The connection is reusable, the null sender works, and so does an SMTPUTF8 address.
    conn.send("", "second@example.com", b"Subject: bounce\r\n\r\nhi").await?;
    conn.send(FROM, "J\u{fc}rgen@example.com", b"Subject: utf8\r\n\r\nhi").await?;
    conn.quit().await;
    let deliveries = sink.deliveries().await;
    assert_eq!(deliveries.len(), 3);
    assert_eq!(deliveries[0].rcpt_to, "reader@example.com");
    assert_eq!(deliveries[0].message_id.as_deref(), Some("x1@herald.test"));
    assert_eq!(deliveries[1].message_id, None);
    assert_eq!(deliveries[2].rcpt_to, "j\u{fc}rgen@example.com");
    Ok(())
}

#[tokio::test]
async fn smtp_client_refuses_command_injection_before_sending() -> anyhow::Result<()> {
    let (sink, server) = sink().await?;
    let mut conn = connect(&server).await?;
    for (from, to) in [
        (FROM, "a@example.com\r\nRCPT TO:<b@example.com>"),
        (FROM, "a@example.com>\nDATA"),
        ("x@y.z\rRSET", "a@example.com"),
        (FROM, "a@exam\u{0}ple.com"),
        (FROM, "no-at-sign"),
    ] {
        let e = conn.send(from, to, b"Subject: x\r\n\r\nx").await.err();
        let e = e.ok_or_else(|| anyhow::anyhow!("{to:?} was sent"))?;
        assert_eq!(e.kind, SmtpErrorKind::Permanent, "{e}");
        assert!(!e.maybe_delivered());
    }
    // Nothing went out, so the connection is still good.
    assert!(conn.is_usable());
    conn.send(FROM, "a@example.com", b"Subject: x\r\n\r\nx").await?;
    assert_eq!(sink.accepted_count(), 1);
    assert_eq!(sink.deliveries().await.len(), 1);
    Ok(())
}

#[tokio::test]
async fn smtp_errors_are_classified_by_stage() -> anyhow::Result<()> {
    let (sink, server) = sink().await?;
    sink.set_faults(
        Faults::rule("busy", FaultAction::mailbox_busy())
            .with_rule(FaultRule::new("unknown", FaultAction::user_unknown()))
            .with_rule(FaultRule::new("policy", FaultAction::RejectRcpt("550 5.7.1 Relaying denied".into())))
            .with_rule(FaultRule::new("later", FaultAction::try_again_later()))
            .with_rule(FaultRule::new("content", FaultAction::RejectData("554 5.6.0 Content rejected".into())))
            .with_rule(FaultRule::new("midway", FaultAction::DropMidData))
            .with_rule(FaultRule::new("ambiguous", FaultAction::DropAfterData)),
    );

    let e = fails(&server, "busy@example.com").await?;
    assert_eq!((e.kind, e.code, e.stage), (SmtpErrorKind::Transient, Some(450), SmtpStage::RcptTo), "{e}");
    assert_eq!(e.to_string(), "RCPT TO: 450 4.2.1 Mailbox busy");

    let e = fails(&server, "Unknown@example.com").await?;
    assert_eq!((e.kind, e.code, e.stage), (SmtpErrorKind::HardBounce, Some(550), SmtpStage::RcptTo), "{e}");
    assert!(e.message.contains("5.1.1 User unknown"), "{e}");

    let e = fails(&server, "policy@example.com").await?;
    assert_eq!((e.kind, e.code), (SmtpErrorKind::Permanent, Some(550)), "{e}");

    let e = fails(&server, "later@example.com").await?;
    assert_eq!((e.kind, e.code, e.stage), (SmtpErrorKind::Transient, Some(451), SmtpStage::Data), "{e}");
    assert!(!e.maybe_delivered());

    let e = fails(&server, "content@example.com").await?;
    assert_eq!((e.kind, e.code, e.stage), (SmtpErrorKind::Permanent, Some(554), SmtpStage::Data), "{e}");

    // The sink hangs up in the middle of the data. For a small message the client has
    // usually written everything already, so it cannot tell this from a drop after the data.
    let e = fails(&server, "midway@example.com").await?;
    assert_eq!((e.kind, e.code), (SmtpErrorKind::Transient, None), "{e}");
    assert!(matches!(e.stage, SmtpStage::Data | SmtpStage::AfterData), "{e}");

    // Stored, then hung up without the 250: ambiguous.
    let e = fails(&server, "ambiguous@example.com").await?;
    assert_eq!((e.kind, e.code, e.stage), (SmtpErrorKind::Transient, None, SmtpStage::AfterData), "{e}");
    assert!(e.maybe_delivered(), "{e}");

    assert_eq!(sink.faults_injected(), 7);
    let delivered: Vec<String> = sink.deliveries().await.into_iter().map(|d| d.rcpt_to).collect();
    assert_eq!(delivered, ["ambiguous@example.com"]);

    // A connection that failed is refused at once, without bytes on the wire.
    let mut conn = connect(&server).await?;
    assert!(conn.send(FROM, "busy@example.com", b"x").await.is_err());
    assert!(!conn.is_usable());
    let e = conn.send(FROM, "fine@example.com", b"x").await.err();
    assert!(e.is_some_and(|e| e.kind == SmtpErrorKind::Transient && !e.maybe_delivered()));
    assert_eq!(sink.accepted_count(), 1);
    Ok(())
}

#[tokio::test]
async fn smtp_connection_errors_are_transient() -> anyhow::Result<()> {
    // Nothing listens on a port we just freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let server = SmtpServer::parse(&format!("smtp://127.0.0.1:{port}"))?;
    let e = SmtpConnection::connect(&server, Duration::from_secs(5)).await.err();
    let e = e.ok_or_else(|| anyhow::anyhow!("connected to a closed port"))?;
    assert_eq!((e.kind, e.stage), (SmtpErrorKind::Transient, SmtpStage::Connect), "{e}");

    // A server that accepts and never says anything: the connect timeout.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let server = SmtpServer::parse(&format!("smtp://{}", silent.local_addr()?))?;
    let e = SmtpConnection::connect(&server, Duration::from_millis(300)).await.err();
    let e = e.ok_or_else(|| anyhow::anyhow!("connected to a silent server"))?;
    assert_eq!((e.kind, e.stage), (SmtpErrorKind::Transient, SmtpStage::Connect), "{e}");

    // STARTTLS required but not offered (the sink has no TLS).
    let (_sink, addr) = MailSink::start("127.0.0.1:0").await?;
    let server = SmtpServer::parse(&format!("smtp://{addr}?tls=required"))?;
    let e = SmtpConnection::connect(&server, Duration::from_secs(5)).await.err();
    assert!(e.is_some_and(|e| e.stage == SmtpStage::Connect && e.message.contains("STARTTLS")));
    // Opportunistic: falls back to plain text.
    let server = SmtpServer::parse(&format!("smtp://{addr}?tls=opportunistic"))?;
    let mut conn = connect(&server).await?;
    conn.send(FROM, "plain@example.com", b"Subject: x\r\n\r\nx").await?;
    // Credentials in the URL: the sink takes any.
    let server = SmtpServer::parse(&format!("smtp://user:secret@{addr}"))?;
    let mut conn = connect(&server).await?;
    conn.send(FROM, "authed@example.com", b"Subject: x\r\n\r\nx").await?;
    // Implicit TLS to a plain-text server: the handshake fails, transiently.
    let server = SmtpServer::parse(&format!("smtps://{addr}"))?;
    let e = SmtpConnection::connect(&server, Duration::from_secs(5)).await.err();
    let e = e.ok_or_else(|| anyhow::anyhow!("TLS to a plain server worked"))?;
    assert_eq!((e.kind, e.stage), (SmtpErrorKind::Transient, SmtpStage::Connect), "{e}");
    assert!(e.message.contains("TLS"), "{e}");
    Ok(())
}

/// A server that offers STARTTLS, says go ahead, then sends plain text where TLS should be.
async fn fake_starttls_server() -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<Vec<String>>)> {
    use tokio::io::AsyncBufReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let mut seen = Vec::new();
        let Ok((stream, _)) = listener.accept().await else { return seen };
        let (read, mut write) = stream.into_split();
        let mut read = tokio::io::BufReader::new(read);
        let _ = write.write_all(b"220-fake.test ESMTP\r\n220 second banner line\r\n").await;
        let mut line = String::new();
        while read.read_line(&mut line).await.unwrap_or(0) > 0 {
            seen.push(line.trim_end().to_string());
            let reply: &[u8] = if line.starts_with("EHLO") {
                b"250-fake.test\r\n250-PIPELINING\r\n250 STARTTLS\r\n"
            } else if line.starts_with("STARTTLS") {
                b"220 2.0.0 go ahead\r\nthis is not TLS\r\n"
            } else {
                b"500 what\r\n"
            };
            let starttls = line.starts_with("STARTTLS");
            line.clear();
            if write.write_all(reply).await.is_err() || starttls {
                break;
            }
        }
        // Let the client read the garbage before the hang-up.
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen
    });
    Ok((addr, task))
}

/// A server that answers RCPT TO after `rcpt_delay`, and records whether the end of a
/// message's data ever reached it.
async fn slow_rcpt_server(rcpt_delay: Duration) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<bool>)> {
    use tokio::io::AsyncBufReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let Ok((stream, _)) = listener.accept().await else { return false };
        let (read, mut write) = stream.into_split();
        let mut read = tokio::io::BufReader::new(read);
        let _ = write.write_all(b"220 slow.test ESMTP\r\n").await;
        let (mut line, mut in_data) = (String::new(), false);
        while read.read_line(&mut line).await.unwrap_or(0) > 0 {
            let reply: &[u8] = if in_data {
                if line == ".\r\n" {
                    return true;
                }
                b""
            } else if line.starts_with("EHLO") {
                b"250-slow.test\r\n250 8BITMIME\r\n"
            } else if line.starts_with("RCPT") {
                tokio::time::sleep(rcpt_delay).await;
                b"250 2.1.5 OK\r\n"
            } else if line.starts_with("DATA") {
                in_data = true;
                b"354 go ahead\r\n"
            } else {
                b"250 2.0.0 OK\r\n"
            };
            line.clear();
            if write.write_all(reply).await.is_err() {
                break;
            }
        }
        false
    });
    Ok((addr, task))
}

/// A server that offers PIPELINING and answers nothing of a transaction until MAIL FROM,
/// RCPT TO and DATA have all arrived: a client that waits for each reply stalls against it.
/// Returns the number of reads the three commands took.
async fn pipelining_server() -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<anyhow::Result<usize>>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await?;
        stream.write_all(b"220 pipe.test ESMTP\r\n").await?;
        let mut seen = Vec::new();
        async fn read(seen: &mut Vec<u8>, stream: &mut tokio::net::TcpStream) -> anyhow::Result<()> {
            let mut buf = [0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await??;
            anyhow::ensure!(n > 0, "the client hung up");
            seen.extend_from_slice(&buf[..n]);
            Ok(())
        }
        while !seen.ends_with(b"\r\n") {
            read(&mut seen, &mut stream).await?;
        }
        stream.write_all(b"250-pipe.test\r\n250-PIPELINING\r\n250 8BITMIME\r\n").await?;
        seen.clear();
        let mut reads = 0;
        while !String::from_utf8_lossy(&seen).contains("DATA\r\n") {
            read(&mut seen, &mut stream).await?;
            reads += 1;
        }
        let text = String::from_utf8_lossy(&seen).to_string();
        anyhow::ensure!(text.starts_with("MAIL FROM:") && text.contains("RCPT TO:"), "got {text:?}");
        stream.write_all(b"250 2.1.0 OK\r\n250 2.1.5 OK\r\n354 go ahead\r\n").await?;
        seen.clear();
        while !seen.ends_with(b"\r\n.\r\n") {
            read(&mut seen, &mut stream).await?;
        }
        stream.write_all(b"250 2.0.0 OK queued as 7\r\n").await?;
        Ok(reads)
    });
    Ok((addr, task))
}

#[tokio::test]
async fn smtp_pipelines_the_envelope_when_the_server_offers_it() -> anyhow::Result<()> {
    let (addr, server) = pipelining_server().await?;
    let mut conn = connect(&SmtpServer::parse(&format!("smtp://{addr}"))?).await?;
    let writes_before = conn.socket_writes();
    let reply = tokio::time::timeout(
        Duration::from_secs(5),
        conn.send("a@herald.test", "b@example.com", &message(1, "b@example.com")),
    )
    .await
    .map_err(|_| anyhow::anyhow!("the client waited for a reply to each command"))??;
    assert!(reply.contains("queued as 7"), "{reply}");
    // MAIL FROM, RCPT TO and DATA went out in one write (one read on loopback).
    assert_eq!(server.await??, 1);
    // The data and its end marker in one more: lettre writes them apart, the stream joins them.
    assert_eq!(conn.socket_writes() - writes_before, 2, "socket writes for one pipelined message");
    Ok(())
}

#[tokio::test]
async fn a_closed_fence_stops_a_transaction_before_the_end_of_its_data() -> anyhow::Result<()> {
    // The fence closes while the server sits on RCPT TO: the client gives up at once, and
    // the server never sees the end of the data (the message cannot have been delivered).
    let (addr, server) = slow_rcpt_server(Duration::from_millis(1_500)).await?;
    let mut conn = connect(&SmtpServer::parse(&format!("smtp://{addr}"))?).await?;
    let fence = Fence::until(Instant::now() + Duration::from_millis(300));
    let started = Instant::now();
    let e = conn.send_fenced("a@herald.test", "b@example.com", &message(1, "b@example.com"), &fence).await;
    let e = e.err().ok_or_else(|| anyhow::anyhow!("the fenced send went through"))?;
    assert_eq!(e.kind, SmtpErrorKind::Fenced, "{e}");
    assert!(!e.maybe_delivered());
    assert!(started.elapsed() < Duration::from_millis(1_000), "it waited for the server: {:?}", started.elapsed());
    drop(conn);
    assert!(!server.await?, "the end of the data reached the server");
    // A fence already closed sends nothing at all.
    let (sink, server) = sink().await?;
    let mut conn = connect(&server).await?;
    let closed = Fence::until(Instant::now());
    let e = conn.send_fenced("a@herald.test", "c@example.com", &message(2, "c@example.com"), &closed).await;
    assert_eq!(e.err().map(|e| e.kind), Some(SmtpErrorKind::Fenced));
    assert_eq!(sink.accepted_count(), 0);
    Ok(())
}

#[tokio::test]
async fn a_fence_closing_after_the_end_of_the_data_still_waits_for_the_reply() -> anyhow::Result<()> {
    // The data is complete when the fence closes; the server may already have the message,
    // so the client waits for its reply rather than pretending nothing happened.
    let (sink, server) = sink().await?;
    sink.set_faults(Faults::none().with_reply_delay(Duration::from_millis(600)));
    let mut conn = connect(&server).await?;
    let fence = Fence::until(Instant::now() + Duration::from_millis(200));
    let reply = conn.send_fenced("a@herald.test", "d@example.com", &message(3, "d@example.com"), &fence).await?;
    assert!(reply.contains("queued"), "{reply}");
    assert_eq!(sink.accepted_count(), 1);
    Ok(())
}

#[tokio::test]
async fn smtp_starttls_is_negotiated_before_tls() -> anyhow::Result<()> {
    for mode in ["required", "opportunistic"] {
        let (addr, task) = fake_starttls_server().await?;
        let server = SmtpServer::parse(&format!("smtp://{addr}/client.herald.test?tls={mode}"))?;
        let e = SmtpConnection::connect(&server, Duration::from_secs(5)).await.err();
        let e = e.ok_or_else(|| anyhow::anyhow!("a TLS session with a plain-text server"))?;
        assert_eq!((e.kind, e.stage), (SmtpErrorKind::Transient, SmtpStage::Connect), "{e}");
        assert!(e.message.contains("TLS handshake"), "{e}");
        assert_eq!(task.await?, ["EHLO client.herald.test", "STARTTLS"]);
    }
    Ok(())
}

#[tokio::test]
async fn smtp_faults_can_fire_once_then_let_through() -> anyhow::Result<()> {
    let (sink, server) = sink().await?;
    sink.set_faults(Faults::none().with_rule(FaultRule::new("flaky", FaultAction::try_again_later()).times(1)));
    let e = fails(&server, "flaky@example.com").await?;
    assert_eq!(e.code, Some(451));
    let mut conn = connect(&server).await?;
    conn.send(FROM, "flaky@example.com", &message(1, "flaky@example.com")).await?;
    // Random faults: all, none, some.
    sink.set_faults(Faults::random(1.0, FaultAction::mailbox_busy()));
    assert_eq!(fails(&server, "any@example.com").await?.code, Some(450));
    sink.set_faults(Faults::random(0.0, FaultAction::mailbox_busy()));
    conn.send(FROM, "any@example.com", &message(2, "any@example.com")).await?;
    sink.set_faults(Faults::random(0.5, FaultAction::try_again_later()));
    let (mut ok, mut failed) = (0, 0);
    for n in 0..100 {
        match conn.send(FROM, "r@example.com", &message(n, "r@example.com")).await {
            Ok(_) => ok += 1,
            Err(e) => {
                assert_eq!(e.code, Some(451), "{e}");
                failed += 1;
                conn = connect(&server).await?;
            }
        }
    }
    assert!(ok > 0 && failed > 0, "{ok} sent, {failed} failed");
    assert_eq!(sink.accepted_count(), 2 + ok);
    Ok(())
}

#[tokio::test]
async fn smtp_client_sends_200_messages_over_one_connection() -> anyhow::Result<()> {
    let (sink, server) = sink().await?;
    let mut conn = connect(&server).await?;
    let started = Instant::now();
    for n in 0..200 {
        let to = format!("reader{n}@example.com");
        conn.send(FROM, &to, &message(n, &to)).await?;
    }
    let elapsed = started.elapsed();
    conn.quit().await;
    assert!(sink.wait_for_count(200, Duration::from_secs(5)).await);
    let deliveries = sink.deliveries().await;
    assert_eq!(deliveries.len(), 200);
    let ids: std::collections::HashSet<_> = deliveries.iter().filter_map(|d| d.message_id.clone()).collect();
    assert_eq!(ids.len(), 200);
    assert!(ids.contains("199.blast@herald.test"));
    eprintln!("one connection: 200 messages in {elapsed:?} ({:.0}/s)", 200.0 / elapsed.as_secs_f64());
    Ok(())
}

/// A stream over a fresh loopback connection, and the server's end.
async fn tapped_pair() -> anyhow::Result<(TappedStream, Arc<Tap>, tokio::net::TcpStream)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let client = TcpStream::connect(listener.local_addr()?).await?;
    let (server, _) = listener.accept().await?;
    let tap = Arc::new(Tap::default());
    Ok((TappedStream::new(Io::Tcp(client), Vec::new(), tap.clone()), tap, server))
}

/// Everything the server receives until the client hangs up.
async fn received(mut server: tokio::net::TcpStream) -> anyhow::Result<Vec<u8>> {
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), server.read_to_end(&mut all)).await??;
    Ok(all)
}

#[tokio::test]
async fn the_stream_sends_whole_lines_and_nothing_after_it_is_closed() -> anyhow::Result<()> {
    // As lettre writes a message: the data without its last CRLF, flushed, then the marker.
    let (mut stream, tap, server) = tapped_pair().await?;
    stream.write_all(b"DATA\r\n").await?;
    stream.flush().await?;
    stream.write_all(b"Subject: hi\r\n\r\nthe last line").await?;
    stream.flush().await?;
    assert_eq!(tap.socket_writes(), 1, "half a line waits for the rest");
    stream.write_all(b"\r\n.\r\n").await?;
    stream.flush().await?;
    assert_eq!(tap.socket_writes(), 2, "the data and its marker in one write");
    assert!(tap.end_of_data_sent());
    drop(stream);
    assert_eq!(received(server).await?, b"DATA\r\nSubject: hi\r\n\r\nthe last line\r\n.\r\n");

    // A transaction given up with its data held back: the data never follows, whatever is
    // written or flushed afterwards (a QUIT on the way out, say).
    let (mut stream, tap, server) = tapped_pair().await?;
    stream.write_all(b"DATA\r\n").await?;
    stream.flush().await?;
    stream.write_all(b"Subject: hi\r\n\r\nthe last line").await?;
    stream.flush().await?;
    tap.close();
    assert!(stream.write_all(b"\r\n.\r\n").await.is_err());
    assert!(stream.flush().await.is_err());
    assert!(stream.write_all(b"QUIT\r\n").await.is_err());
    assert!(stream.shutdown().await.is_err());
    assert!(!tap.end_of_data_sent());
    drop(stream);
    assert_eq!(received(server).await?, b"DATA\r\n");
    Ok(())
}
