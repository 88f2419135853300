//! Which I/O failures on a connection retrying cannot fix: the TLS refusals that are a
//! configuration error.

use std::io;

use rustls::AlertDescription;

/// The message for a TLS failure that retrying cannot fix (other than a certificate the
/// client rejected): the broker refused the client's certificate or shares no protocol with
/// it, or the listener does not speak TLS.
pub(crate) fn refusal(addr: &str, err: &rustls::Error) -> Option<String> {
    Some(match err {
        rustls::Error::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::CertificateRequired
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateRevoked
            | AlertDescription::AccessDenied),
        ) => format!(
            "the broker at {addr} refused this client's TLS certificate (alert {alert:?}): it \
             requires a client certificate it trusts; set ssl.certificate.location and \
             ssl.key.location to one signed by a CA in the broker's truststore"
        ),
        rustls::Error::AlertReceived(
            alert @ (AlertDescription::HandshakeFailure
            | AlertDescription::ProtocolVersion
            | AlertDescription::InsufficientSecurity),
        ) => format!(
            "the broker at {addr} ended the TLS handshake (alert {alert:?}): it shares no TLS \
             version (1.2 or 1.3) or cipher suite with this client"
        ),
        rustls::Error::InvalidMessage(_)
        | rustls::Error::InappropriateMessage { .. }
        | rustls::Error::InappropriateHandshakeMessage { .. } => format!(
            "the broker at {addr} does not speak TLS ({err}): security.protocol must match the \
             listener's (SSL or SASL_SSL only for a TLS listener)"
        ),
        _ => return None,
    })
}

pub(crate) fn rustls_error(e: &io::Error) -> Option<&rustls::Error> {
    e.get_ref()?.downcast_ref::<rustls::Error>()
}
