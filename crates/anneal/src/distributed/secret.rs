//! The job's secret: what makes the ranks of one job know each other at the
//! rendezvous. A launcher may make a random one per job and hand it to its
//! ranks in [`SECRET_ENV`]; under torchrun or Slurm users set that variable
//! themselves, and without it the launcher's job id stands in. Both ends of
//! a connection prove they hold it by an HMAC-SHA256 of fresh nonces, so
//! the secret itself never crosses the wire.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::DistError;

/// The job's secret, the same on every rank of one job and different for
/// every job (a launcher may set it; set it yourself under torchrun or
/// Slurm, e.g. to `openssl rand -hex 16`).
pub const SECRET_ENV: &str = "KILN_JOB_SECRET";

/// Bytes of the nonces each end of a rendezvous connection draws.
pub(super) const NONCE_BYTES: usize = 32;

/// Bytes of an HMAC-SHA256 proof.
pub(super) const PROOF_BYTES: usize = 32;

/// Where a [`JobSecret`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretSource {
    /// [`SECRET_ENV`].
    Variable,
    /// torchrun's run id (`TORCHELASTIC_RUN_ID`, when not its default
    /// `none`).
    Torchrun,
    /// Slurm's job and step (`SLURM_JOB_ID`, `SLURM_STEP_ID`).
    Slurm,
    /// Nothing: every job without a secret or a job id shares this one, so
    /// only the world size and the problem tell such jobs apart.
    Unset,
}

/// A job's secret: the key of the rendezvous's proofs. Its `Debug` shows
/// where it came from, never its bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct JobSecret {
    key: Vec<u8>,
    source: SecretSource,
}

impl std::fmt::Debug for JobSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobSecret")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl JobSecret {
    /// A secret given as text (what [`SECRET_ENV`] holds).
    pub fn new(secret: &str) -> Self {
        Self::tagged(SecretSource::Variable, secret)
    }

    /// Each source in its own domain: a job id never equals a secret that
    /// happens to spell it.
    fn tagged(source: SecretSource, value: &str) -> Self {
        let tag = match source {
            SecretSource::Variable => "secret",
            SecretSource::Torchrun => "torchrun",
            SecretSource::Slurm => "slurm",
            SecretSource::Unset => "unset",
        };
        let mut key = format!("kiln.job/{tag}\0").into_bytes();
        key.extend_from_slice(value.as_bytes());
        Self { key, source }
    }

    /// The secret every job without one shares ([`SecretSource::Unset`]).
    pub fn unset() -> Self {
        Self::tagged(SecretSource::Unset, "")
    }

    /// A fresh random secret for one job, as the text to put in
    /// [`SECRET_ENV`]: 32 bytes of the OS's generator, in hex.
    pub fn generate() -> Result<String, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Where it came from.
    pub fn source(&self) -> SecretSource {
        self.source
    }

    /// The job's secret from the variables (`lookup(name)`): [`SECRET_ENV`]
    /// wins, then torchrun's run id, then Slurm's job and step; none of
    /// them gives [`JobSecret::unset`]. An empty [`SECRET_ENV`] is refused.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, DistError> {
        if let Some(value) = lookup(SECRET_ENV) {
            if value.trim().is_empty() {
                return Err(DistError::BadVar {
                    var: SECRET_ENV,
                    value: String::new(),
                    why: "empty; give every rank of the job the same secret \
                          (`openssl rand -hex 16`), or unset it"
                        .into(),
                });
            }
            return Ok(Self::new(&value));
        }
        let set = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
        // torchrun's default run id is "none" for every job: no id at all.
        if let Some(run) = set("TORCHELASTIC_RUN_ID").filter(|v| v.trim() != "none") {
            return Ok(Self::tagged(SecretSource::Torchrun, run.trim()));
        }
        if let Some(job) = set("SLURM_JOB_ID") {
            let step = set("SLURM_STEP_ID").unwrap_or_default();
            let id = format!("{}.{}", job.trim(), step.trim());
            return Ok(Self::tagged(SecretSource::Slurm, &id));
        }
        Ok(Self::unset())
    }

    /// The proof that one end of a connection holds this secret: the HMAC
    /// of `role` and `parts`, each length-prefixed so that no two lists of
    /// parts read the same.
    pub(super) fn prove(&self, role: &str, parts: &[&[u8]]) -> [u8; PROOF_BYTES] {
        self.mac(role, parts).finalize().into_bytes().into()
    }

    /// Whether `proof` is [`JobSecret::prove`] of `role` and `parts`,
    /// compared in constant time.
    pub(super) fn verify(&self, proof: &[u8], role: &str, parts: &[&[u8]]) -> bool {
        self.mac(role, parts).verify_slice(proof).is_ok()
    }

    fn mac(&self, role: &str, parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC takes any key length");
        for part in std::iter::once(role.as_bytes()).chain(parts.iter().copied()) {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        mac
    }
}

/// A fresh nonce from the OS's generator.
pub(super) fn nonce() -> Result<[u8; NONCE_BYTES], DistError> {
    let mut bytes = [0u8; NONCE_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| DistError::Random(e.to_string()))?;
    Ok(bytes)
}
