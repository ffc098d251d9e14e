//! A certificate's subject as a distinguished name in the string form of RFC 4514
//! ("CN=client,O=Example Org,C=GB": the last relative name first, as
//! `openssl x509 -noout -subject -nameopt RFC2253` prints it), read from the certificate's DER
//! (X.690's distinguished encoding of X.509, RFC 5280 section 4.1) for `--tls-authz`.

/// One DER element at the start of `der`: its tag, its contents, and the bytes after it.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        short if short < 0x80 => (short as usize, rest),
        long => {
            let n = (long & 0x7f) as usize;
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            (rest[..n].iter().fold(0usize, |len, &b| len << 8 | b as usize), &rest[n..])
        }
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
/// The `[0]` that holds a certificate's version, when it is not 1.
const VERSION: u8 = 0xa0;

/// The subject of the DER certificate `cert`, `None` if it cannot be read.
pub fn subject(cert: &[u8]) -> Option<String> {
    let (SEQUENCE, certificate, _) = element(cert)? else { return None };
    let (SEQUENCE, mut fields, _) = element(certificate)? else { return None };
    if let (VERSION, _, rest) = element(fields)? {
        fields = rest;
    }
    // The serial number, the signature's algorithm, the issuer and the validity come first.
    for _ in 0..4 {
        fields = element(fields)?.2;
    }
    let (SEQUENCE, name, _) = element(fields)? else { return None };
    distinguished_name(name)
}

/// A Name's relative names (each a SET of type and value pairs), last first.
fn distinguished_name(mut name: &[u8]) -> Option<String> {
    let mut relative = Vec::new();
    while !name.is_empty() {
        let (SET, mut set, rest) = element(name)? else { return None };
        name = rest;
        let mut pairs = Vec::new();
        while !set.is_empty() {
            let (SEQUENCE, pair, rest) = element(set)? else { return None };
            set = rest;
            let (OID, oid, value) = element(pair)? else { return None };
            let (tag, text, _) = element(value)?;
            let (kind, value) = match (short_name(oid), string(tag, text)) {
                (Some(kind), Some(text)) => (kind.to_string(), escaped(&text)),
                // Types without a short name, or values that are not strings, as RFC 4514
                // writes them: the dotted OID, and the value's DER in hex after a '#'.
                (kind, _) => {
                    let kind = kind.map(str::to_string).or_else(|| dotted(oid))?;
                    (kind, format!("#{}", hex(value)))
                }
            };
            pairs.push(format!("{kind}={value}"));
        }
        relative.push(pairs.join("+"));
    }
    relative.reverse();
    Some(relative.join(","))
}

/// The short names RFC 4514 section 3 gives attribute types.
fn short_name(oid: &[u8]) -> Option<&'static str> {
    const DC: &[u8] = &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19];
    const UID: &[u8] = &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01];
    Some(match oid {
        [0x55, 0x04, 0x03] => "CN",
        [0x55, 0x04, 0x06] => "C",
        [0x55, 0x04, 0x07] => "L",
        [0x55, 0x04, 0x08] => "ST",
        [0x55, 0x04, 0x09] => "STREET",
        [0x55, 0x04, 0x0a] => "O",
        [0x55, 0x04, 0x0b] => "OU",
        DC => "DC",
        UID => "UID",
        _ => return None,
    })
}

/// The text of a directory string (UTF8String, PrintableString, IA5String, TeletexString as
/// Latin-1, BMPString, UniversalString).
fn string(tag: u8, bytes: &[u8]) -> Option<String> {
    match tag {
        0x0c | 0x13 | 0x16 => std::str::from_utf8(bytes).ok().map(str::to_string),
        0x14 => Some(bytes.iter().map(|&b| b as char).collect()),
        0x1e if bytes.len().is_multiple_of(2) => {
            let units = bytes.chunks_exact(2).map(|u| u16::from_be_bytes([u[0], u[1]]));
            char::decode_utf16(units).collect::<Result<String, _>>().ok()
        }
        0x1c if bytes.len().is_multiple_of(4) => bytes
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        _ => None,
    }
}

/// A value with the characters RFC 4514 section 2.4 escapes escaped.
fn escaped(value: &str) -> String {
    let last = value.chars().count().saturating_sub(1);
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        match c {
            '"' | '+' | ',' | ';' | '<' | '>' | '\\' => out.push('\\'),
            '#' if i == 0 => out.push('\\'),
            ' ' if i == 0 || i == last => out.push('\\'),
            '\0' => {
                out.push_str("\\00");
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

/// An OID's contents in dotted decimal.
fn dotted(oid: &[u8]) -> Option<String> {
    let (&first, rest) = oid.split_first()?;
    let mut arcs = vec![(first / 40).min(2) as u64, first as u64 - 40 * (first / 40).min(2) as u64];
    let mut arc = 0u64;
    for &b in rest {
        arc = arc.checked_mul(128)? | (b & 0x7f) as u64;
        if b & 0x80 == 0 {
            arcs.push(arc);
            arc = 0;
        }
    }
    let text: Vec<String> = arcs.iter().map(u64::to_string).collect();
    Some(text.join("."))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DER element of `tag` around `contents`.
    fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        match contents.len() {
            n if n < 0x80 => out.push(n as u8),
            n => out.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]),
        }
        out.extend_from_slice(contents);
        out
    }

    fn pair(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        der(SEQUENCE, &[der(OID, oid), der(tag, value)].concat())
    }

    /// A certificate with `subject` (a Name's contents) and filler everywhere else.
    fn certificate(subject: &[u8]) -> Vec<u8> {
        let tbs = [
            der(VERSION, &der(0x02, &[2])),
            der(0x02, &[1, 2, 3]),
            der(SEQUENCE, &der(OID, &[0x2a, 0x86, 0x48])),
            der(SEQUENCE, &der(SET, &pair(&[0x55, 4, 3], 0x0c, b"issuer"))),
            der(SEQUENCE, &[der(0x17, b"260101000000Z"), der(0x17, b"270101000000Z")].concat()),
            der(SEQUENCE, subject),
            der(SEQUENCE, &[0u8; 200]), // A key, long enough for a long length.
        ]
        .concat();
        der(SEQUENCE, &[der(SEQUENCE, &tbs), der(SEQUENCE, &[]), der(0x03, &[0])].concat())
    }

    #[test]
    fn subjects_read_as_rfc_4514_writes_them() {
        let name = [
            der(SET, &pair(&[0x55, 4, 6], 0x13, b"GB")),
            der(SET, &pair(&[0x55, 4, 10], 0x0c, b"Example, Ltd")),
            der(
                SET,
                &[pair(&[0x55, 4, 11], 0x0c, b"Storage"), pair(&[0x55, 4, 3], 0x13, b" host")]
                    .concat(),
            ),
        ]
        .concat();
        assert_eq!(
            subject(&certificate(&name)).as_deref(),
            Some("OU=Storage+CN=\\ host,O=Example\\, Ltd,C=GB")
        );
        // Types without a short name: the dotted OID and the value's DER in hex.
        let email = der(SET, &pair(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 1, 9, 1], 0x16, b"a@b"));
        assert_eq!(
            subject(&certificate(&email)).as_deref(),
            Some("1.2.840.113549.1.9.1=#1603614062")
        );
        // A BMPString reads as its text; a cut certificate as nothing.
        let bmp = der(SET, &pair(&[0x55, 4, 3], 0x1e, &[0, b'h', 0, b'i']));
        assert_eq!(subject(&certificate(&bmp)).as_deref(), Some("CN=hi"));
        let whole = certificate(&bmp);
        assert_eq!(subject(&whole[..whole.len() / 2]), None);
        assert_eq!(subject(&[]), None);
    }
}
