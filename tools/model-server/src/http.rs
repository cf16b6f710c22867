//! A minimal HTTP/1.1 server side: reading one request (head, then a `Content-Length` or
//! chunked body) with a deadline on every read, and writing a whole response or a chunked
//! stream. Connections are kept alive, as the harnesses' HTTP clients expect, until the peer
//! closes or stays silent past the idle deadline.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long a connection may sit silent, between requests or inside one, before it is closed.
/// A harness's client reuses a connection within seconds; a longer silence is a dead peer.
pub const READ_DEADLINE: Duration = Duration::from_secs(30);

/// The largest request head and body accepted. A harness's request carries its whole
/// conversation and tool list: a few hundred kilobytes at most in these tests.
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 32 * 1024 * 1024;

/// One parsed request.
pub struct Request {
    pub method: String,
    /// The path without the query string.
    pub path: String,
    /// The query string, without the `?`.
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// A connection: a buffered reader and the stream to write replies on.
pub struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Connection {
    pub fn new(stream: TcpStream) -> io::Result<Connection> {
        stream.set_read_timeout(Some(READ_DEADLINE))?;
        stream.set_write_timeout(Some(READ_DEADLINE))?;
        stream.set_nodelay(true)?;
        let writer = stream.try_clone()?;
        Ok(Connection {
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// Reads the next request; `Ok(None)` when the peer closed the connection between requests.
    pub fn read_request(&mut self) -> io::Result<Option<Request>> {
        let mut line = String::new();
        // Blank lines before a request line are allowed by RFC 9112 §2.2.
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Ok(None);
            }
            if !line.trim().is_empty() {
                break;
            }
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
            return Err(invalid(format!("bad request line {:?}", line.trim_end())));
        };
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut request = Request {
            method: method.to_string(),
            path: path.to_string(),
            query: query.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
        };
        let mut head_bytes = line.len();
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(invalid("connection closed inside the request head".into()));
            }
            head_bytes += line.len();
            if head_bytes > MAX_HEAD {
                return Err(invalid(format!("request head over {MAX_HEAD} bytes")));
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                request
                    .headers
                    .push((name.trim().to_string(), value.trim().to_string()));
            }
        }
        if request
            .header("expect")
            .is_some_and(|value| value.eq_ignore_ascii_case("100-continue"))
        {
            self.writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        request.body = self.read_body(&request)?;
        Ok(Some(request))
    }

    fn read_body(&mut self, request: &Request) -> io::Result<Vec<u8>> {
        let chunked = request
            .header("transfer-encoding")
            .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"));
        if chunked {
            return self.read_chunked();
        }
        let length = match request.header("content-length") {
            Some(value) => value
                .parse::<usize>()
                .map_err(|_| invalid(format!("bad Content-Length {value:?}")))?,
            None => 0,
        };
        if length > MAX_BODY {
            return Err(invalid(format!(
                "body of {length} bytes is over {MAX_BODY}"
            )));
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body)?;
        Ok(body)
    }

    fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        let mut line = String::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let size_text = line.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| invalid(format!("bad chunk size {:?}", line.trim())))?;
            if body.len() + size > MAX_BODY {
                return Err(invalid(format!("chunked body over {MAX_BODY} bytes")));
            }
            if size == 0 {
                // Trailers, then the blank line that ends the body.
                loop {
                    line.clear();
                    if self.reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                        return Ok(body);
                    }
                }
            }
            let start = body.len();
            body.resize(start + size, 0);
            self.reader.read_exact(&mut body[start..])?;
            line.clear();
            self.reader.read_line(&mut line)?;
        }
    }

    /// Writes a whole response with a `Content-Length`.
    pub fn respond(&mut self, status: u16, content_type: &str, body: &[u8]) -> io::Result<()> {
        self.respond_with(status, content_type, &[], body)
    }

    /// Writes a whole response with a `Content-Length` and extra headers (a rate limit's
    /// reset time, for one).
    pub fn respond_with(
        &mut self,
        status: u16,
        content_type: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> io::Result<()> {
        let extra: String = headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}\r\n"))
            .collect();
        let head = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
             {extra}Connection: keep-alive\r\n\r\n",
            reason(status),
            body.len()
        );
        self.writer.write_all(head.as_bytes())?;
        self.writer.write_all(body)?;
        self.writer.flush()
    }

    /// Starts a chunked `text/event-stream` response with extra headers (a usage window's
    /// state, for one); the caller writes events with [`Connection::chunk`] and ends it with
    /// [`Connection::end_chunks`].
    pub fn start_stream(&mut self, headers: &[(String, String)]) -> io::Result<()> {
        let extra: String = headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}\r\n"))
            .collect();
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
             Transfer-Encoding: chunked\r\n{extra}Connection: keep-alive\r\n\r\n"
        );
        self.writer.write_all(head.as_bytes())?;
        self.writer.flush()
    }

    /// Writes one chunk (one or more whole SSE events) and flushes it, so the harness sees it
    /// at once.
    pub fn chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.writer
            .write_all(format!("{:x}\r\n", data.len()).as_bytes())?;
        self.writer.write_all(data)?;
        self.writer.write_all(b"\r\n")?;
        self.writer.flush()
    }

    pub fn end_chunks(&mut self) -> io::Result<()> {
        self.writer.write_all(b"0\r\n\r\n")?;
        self.writer.flush()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}
