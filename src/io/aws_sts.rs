//! Assuming a role: one `AssumeRole` call to AWS STS.
//!
//! The call is a `POST /` to the STS endpoint with a form body (`Action=AssumeRole`,
//! `Version=2011-06-15`, `RoleArn`, `RoleSessionName`, and `ExternalId`, `DurationSeconds`
//! when the profile sets them), signed with SigV4 for service `sts` by `object_store`'s
//! signer, with the credentials of the profile's source. The endpoint is the one the
//! configuration names (see `endpoint`), else the regional `https://sts.REGION.amazonaws.com`
//! (region `us-east-1` when the profile names none).
//!
//! Bounds: the request, body included, takes at most [`TIMEOUT`]; the answer is read up to
//! [`MAX_ANSWER`] bytes; a redirect is not followed (the request carries the source's
//! credentials, which go to the configured endpoint and nowhere else). The answer is the
//! XML of `AssumeRoleResponse`, of which the four fields of `Credentials` are read
//! (`SessionToken` may be missing, for STS-like services that issue none); an error answer
//! gives its status, `Code` and `Message` (they name the role, never a secret).

use std::time::{Duration, SystemTime};

use futures_util::StreamExt;
use object_store::aws::{AwsAuthorizer, AwsCredential};
use object_store::client::{HttpClient, HttpRequestBody};

use super::aws_credential_process::Issued;

/// Longest an AssumeRole call may take, connecting and reading the answer included.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read (an AssumeRole answer is about 2 KiB).
pub const MAX_ANSWER: usize = 64 << 10;

/// One AssumeRole call, ready to send.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AssumeRole {
    pub role_arn: String,
    pub session_name: String,
    pub external_id: Option<String>,
    pub duration_seconds: Option<u32>,
    pub region: String,
    pub endpoint: url::Url,
}

/// The endpoint of STS: `configured` (the environment's `AWS_ENDPOINT_URL_STS`, else the
/// profile's, see [`aws_profile`](super::aws_profile)) if any, else the regional one.
pub(crate) fn endpoint(region: &str, configured: Option<&str>) -> Result<url::Url, String> {
    let text = match configured {
        Some(e) => e.to_string(),
        None => format!("https://sts.{region}.amazonaws.com/"),
    };
    // Refused before the text is shown anywhere: a password may hold a `/` that makes the
    // rest unparseable, and messages must not carry it. An endpoint has no use for an `@`.
    if text
        .split_once("://")
        .is_some_and(|(_, rest)| rest.contains('@'))
    {
        return Err("the STS endpoint holds a user name or password".into());
    }
    let url = url::Url::parse(&text).map_err(|e| format!("STS endpoint {text}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
        return Err(format!(
            "STS endpoint {text}: not an http(s) URL with a host"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("the STS endpoint holds a user name or password".into());
    }
    Ok(url)
}

/// The HTTP client for STS calls: the remote sources' own (bounded in time, counted, no
/// content encoding), following no redirect.
pub(crate) fn client() -> Result<HttpClient, String> {
    use object_store::client::HttpConnector;
    // Its requests are counted apart from any mount's: the credentials are made before
    // the options that hold a mount's counters.
    let connector = super::remote::CountingConnector {
        timeout: TIMEOUT,
        redirects: super::remote::Redirects::Never,
        net: std::sync::Arc::default(),
    };
    connector
        .connect(&object_store::ClientOptions::new())
        .map_err(|e| format!("cannot make an HTTP client: {e}"))
}

/// Assume `call`'s role with `source`'s credentials.
pub(crate) async fn assume_role(
    client: &HttpClient,
    call: &AssumeRole,
    source: &AwsCredential,
) -> Result<Issued, String> {
    let body = form(call);
    let mut request = http::Request::builder()
        .method(http::Method::POST)
        .uri(call.endpoint.as_str())
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded; charset=utf-8",
        )
        .body(HttpRequestBody::from(body.into_bytes()))
        .map_err(|e| format!("cannot build the request: {e}"))?;
    AwsAuthorizer::new(source, "sts", &call.region).authorize(&mut request, None);
    let exchange = async {
        let answer = client.execute(request).await.map_err(|e| {
            format!(
                "request to {} failed: {}",
                call.endpoint,
                super::remote::chain(&e)
            )
        })?;
        let status = answer.status().as_u16();
        let mut body = Vec::new();
        let mut stream = answer.into_body().bytes_stream();
        while let Some(piece) = stream.next().await {
            let piece = piece.map_err(|e| format!("answer cut short: {e}"))?;
            if body.len().saturating_add(piece.len()) > MAX_ANSWER {
                return Err(format!("an answer of more than {} KiB", MAX_ANSWER / 1024));
            }
            body.extend_from_slice(&piece);
        }
        Ok((status, body))
    };
    let (status, body) = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| format!("no answer within {} s", TIMEOUT.as_secs()))??;
    parse_answer(status, &body)
}

/// The form body of `call`.
pub(crate) fn form(call: &AssumeRole) -> String {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("Action", "AssumeRole")
        .append_pair("Version", "2011-06-15")
        .append_pair("RoleArn", &call.role_arn)
        .append_pair("RoleSessionName", &call.session_name);
    if let Some(id) = &call.external_id {
        form.append_pair("ExternalId", id);
    }
    if let Some(d) = call.duration_seconds {
        form.append_pair("DurationSeconds", &d.to_string());
    }
    form.finish()
}

/// Read an AssumeRole answer of HTTP status `status`.
pub(crate) fn parse_answer(status: u16, body: &[u8]) -> Result<Issued, String> {
    let text = String::from_utf8_lossy(body);
    if status != 200 {
        let code = xml_text(&text, "Code");
        let message = xml_text(&text, "Message");
        let mut said = format!("STS answered status {status}");
        if (300..400).contains(&status) {
            said.push_str(" (a redirect, not followed)");
        }
        for part in [code, message].into_iter().flatten() {
            said.push_str(": ");
            said.push_str(&shown(&part));
        }
        return Err(said);
    }
    let credentials = between(&text, "Credentials").ok_or("STS answered without Credentials")?;
    let field = |tag: &str| {
        xml_text(credentials, tag)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("STS answered without {tag}"))
    };
    let key_id = field("AccessKeyId")?;
    let secret_key = field("SecretAccessKey")?;
    let token = field("SessionToken").ok();
    let expiration = field("Expiration")?;
    for (tag, value) in [
        ("AccessKeyId", Some(&key_id)),
        ("SessionToken", token.as_ref()),
    ] {
        if value.is_some_and(|v| !super::aws_profile::header_safe(v)) {
            return Err(format!(
                "STS answered with a {tag} of characters other than printable ASCII"
            ));
        }
    }
    let expires = chrono::DateTime::parse_from_rfc3339(&expiration)
        .map(SystemTime::from)
        .map_err(|_| "STS answered with an Expiration that is not an RFC 3339 time".to_string())?;
    Ok(Issued {
        credential: AwsCredential {
            key_id,
            secret_key,
            token,
        },
        expires: Some(expires),
    })
}

/// What lies between `<tag>` and the following `</tag>` (tags without attributes, as STS
/// writes them).
fn between<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{tag}>"))?;
    Some(&xml[start..start + end])
}

/// The text of element `tag`, its entities decoded.
fn xml_text(xml: &str, tag: &str) -> Option<String> {
    let raw = between(xml, tag)?.trim();
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let Some(semi) = rest.find(';').filter(|&s| s <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let entity = &rest[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

/// A server's text for a message: printable, one line, at most 300 characters.
fn shown(text: &str) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect();
    if text.chars().count() > 300 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::aws_sts_fake as fake;

    const ANSWER: &str = r#"<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <SourceIdentity>x</SourceIdentity>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/demo/h5mount</Arn>
      <AssumedRoleId>ARO123EXAMPLE123:h5mount</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY&amp;x</SecretAccessKey>
      <SessionToken>IQoJb3JpZ2luX2VjEXAMPLE+token/=</SessionToken>
      <Expiration>2030-01-01T01:00:00.123Z</Expiration>
    </Credentials>
  </AssumeRoleResult>
</AssumeRoleResponse>"#;

    #[test]
    fn an_answer_gives_its_credentials() {
        let got = parse_answer(200, ANSWER.as_bytes()).unwrap();
        assert_eq!(got.credential.key_id, "ASIAIOSFODNN7EXAMPLE");
        assert_eq!(
            got.credential.secret_key,
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY&x"
        );
        assert_eq!(
            got.credential.token.as_deref(),
            Some("IQoJb3JpZ2luX2VjEXAMPLE+token/=")
        );
        let want = SystemTime::UNIX_EPOCH + Duration::from_millis(1_893_459_600_123);
        assert_eq!(got.expires, Some(want));
        // No token: allowed (STS-like services); no expiration: not.
        let no_token = ANSWER.replace(
            "<SessionToken>IQoJb3JpZ2luX2VjEXAMPLE+token/=</SessionToken>",
            "",
        );
        assert_eq!(
            parse_answer(200, no_token.as_bytes())
                .unwrap()
                .credential
                .token,
            None
        );
        let no_exp = ANSWER.replace("<Expiration>2030-01-01T01:00:00.123Z</Expiration>", "");
        assert_eq!(
            parse_answer(200, no_exp.as_bytes()).unwrap_err(),
            "STS answered without Expiration"
        );
    }

    #[test]
    fn error_answers_say_status_code_and_message_never_a_panic() {
        let body = "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>\
                    <Message>User: arn:aws:iam::1:user/u is not authorized to perform: \
                    sts:AssumeRole on resource: r &amp; s</Message></Error></ErrorResponse>";
        assert_eq!(
            parse_answer(403, body.as_bytes()).unwrap_err(),
            "STS answered status 403: AccessDenied: User: arn:aws:iam::1:user/u is not \
             authorized to perform: sts:AssumeRole on resource: r & s"
        );
        assert_eq!(
            parse_answer(307, b"").unwrap_err(),
            "STS answered status 307 (a redirect, not followed)"
        );
        let long = format!("<Message>{}\n</Message>", "x".repeat(1000));
        let e = parse_answer(500, long.as_bytes()).unwrap_err();
        assert!(e.len() < 400 && e.ends_with('…'), "{e}");
        for body in [
            &b""[..],
            b"<Credentials>",
            b"<Credentials><AccessKeyId>A</AccessKeyId></Credentials>",
            b"\xff\xfe<Credentials></Credentials>",
            b"<Credentials><AccessKeyId>A B</AccessKeyId><SecretAccessKey>s</SecretAccessKey>\
              <Expiration>2030-01-01T00:00:00Z</Expiration></Credentials>",
            b"<Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>s</SecretAccessKey>\
              <Expiration>soon</Expiration></Credentials>",
        ] {
            assert!(parse_answer(200, body).is_err());
        }
    }

    #[test]
    fn entities_decode_and_stray_ampersands_stay() {
        let x = |s: &str| xml_text(&format!("<a>{s}</a>"), "a").unwrap();
        assert_eq!(x("&lt;&gt;&quot;&apos;&amp;"), "<>\"'&");
        assert_eq!(x("&#65;&#x42;"), "AB");
        assert_eq!(
            x("a & b &bogus; &#xffffffff; &"),
            "a & b &bogus; &#xffffffff; &"
        );
    }

    const SOURCE_SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYSOURCEKEY";

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn source() -> AwsCredential {
        AwsCredential {
            key_id: "AKIDSOURCE".into(),
            secret_key: SOURCE_SECRET.into(),
            token: Some("source-token".into()),
        }
    }

    fn call(endpoint_url: &str) -> AssumeRole {
        AssumeRole {
            role_arn: "arn:aws:iam::123456789012:role/reader".into(),
            session_name: "h5mount-test".into(),
            external_id: Some("ext &=id".into()),
            duration_seconds: Some(3600),
            region: "eu-west-1".into(),
            endpoint: endpoint("eu-west-1", Some(endpoint_url)).unwrap(),
        }
    }

    fn assume(url: &str) -> Result<Issued, String> {
        rt().block_on(assume_role(&client().unwrap(), &call(url), &source()))
    }

    #[test]
    fn assume_role_posts_a_signed_form_and_reads_the_answer() {
        let sts = fake::FakeSts::start(|_| {
            fake::answer("ASIANEW", "new-secret", "new-token", "2030-01-01T01:00:00Z")
        });
        let got = assume(&sts.url).unwrap();
        assert_eq!(got.credential.key_id, "ASIANEW");
        assert_eq!(got.credential.secret_key, "new-secret");
        assert_eq!(got.credential.token.as_deref(), Some("new-token"));
        let want = SystemTime::UNIX_EPOCH + Duration::from_secs(1_893_459_600);
        assert_eq!(got.expires, Some(want));
        let requests = sts.requests();
        assert_eq!(requests.len(), 1);
        let r = &requests[0];
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/"));
        assert_eq!(
            r.header("content-type"),
            Some("application/x-www-form-urlencoded; charset=utf-8")
        );
        for (key, value) in [
            ("Action", "AssumeRole"),
            ("Version", "2011-06-15"),
            ("RoleArn", "arn:aws:iam::123456789012:role/reader"),
            ("RoleSessionName", "h5mount-test"),
            ("ExternalId", "ext &=id"),
            ("DurationSeconds", "3600"),
        ] {
            assert_eq!(r.form(key).as_deref(), Some(value), "{key}");
        }
        assert_eq!(r.header("x-amz-security-token"), Some("source-token"));
        let auth = r.header("authorization").unwrap();
        assert!(auth.contains("/eu-west-1/sts/aws4_request"), "{auth}");
        assert!(!auth.contains(SOURCE_SECRET));
        assert_eq!(r.signed_by(SOURCE_SECRET).as_deref(), Some("AKIDSOURCE"));
        assert_eq!(r.signed_by("another secret"), None);
    }

    #[test]
    fn a_redirect_is_not_followed_and_its_target_gets_nothing() {
        let elsewhere =
            fake::FakeSts::start(|_| fake::answer("A", "s", "t", "2030-01-01T00:00:00Z"));
        let target = elsewhere.url.clone();
        let sts = fake::FakeSts::start(move |_| {
            (
                307,
                vec![("Location".into(), target.clone())],
                String::new(),
            )
        });
        let e = assume(&sts.url).unwrap_err();
        assert!(
            e.contains("answered with a redirect to") && e.contains("never sent elsewhere"),
            "{e}"
        );
        assert_eq!(sts.requests().len(), 1);
        assert!(elsewhere.requests().is_empty());
    }

    #[test]
    fn an_answer_past_the_bound_is_refused() {
        let sts = fake::FakeSts::start(|_| (200, vec![], "x".repeat(MAX_ANSWER + 1)));
        assert_eq!(
            assume(&sts.url).unwrap_err(),
            "an answer of more than 64 KiB"
        );
    }

    #[test]
    fn an_endpoint_that_does_not_answer_is_named() {
        let e = assume("http://127.0.0.1:9/").unwrap_err();
        assert!(
            e.starts_with("request to http://127.0.0.1:9/ failed"),
            "{e}"
        );
    }

    #[test]
    fn endpoints() {
        assert_eq!(
            endpoint("eu-west-1", None).unwrap().as_str(),
            "https://sts.eu-west-1.amazonaws.com/"
        );
        assert_eq!(
            endpoint("x", Some("http://127.0.0.1:9/sts"))
                .unwrap()
                .as_str(),
            "http://127.0.0.1:9/sts"
        );
        for bad in ["127.0.0.1:9", "ftp://h/", "http://u:p@h/", "not a url"] {
            assert!(endpoint("x", Some(bad)).is_err(), "{bad}");
        }
        // Never the password, also where it keeps the rest from parsing.
        for with_password in [
            "http://u:secret@h/",
            "ftp://u:secret@h/",
            "http://u:secret@h:99999/",
            "http://u:sec/ret@h/",
        ] {
            let e = endpoint("x", Some(with_password)).unwrap_err();
            assert!(!e.contains("secret") && !e.contains("sec/"), "{e}");
        }
    }
}
