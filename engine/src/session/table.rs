//! Demultiplexing received packets to sessions (RFC 5880 section 6.8.6,
//! RFC 5881 section 5): by Your Discriminator when it is non-zero, by
//! address pair (and interface) for the bootstrap packets that carry 0.

use super::Session;
use crate::wire::Repr;
use linecard_common::bfd::DropReason;
use std::collections::HashMap;
use std::net::IpAddr;

/// What identifies a session before discriminators are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct PathKey {
    pub local: IpAddr,
    pub peer: IpAddr,
    pub multihop: bool,
}

/// Sessions indexed by local discriminator and by path.
pub struct SessionTable<T> {
    entries: Vec<Option<(PathKey, Session, T)>>,
    by_discr: HashMap<u32, usize>,
    by_path: HashMap<PathKey, usize>,
}

/// Index of a session in its table; stable while the session exists.
pub type SessionId = usize;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TableError {
    #[error("a session for {0:?} already exists")]
    Duplicate(PathKey),
    #[error("discriminator {0} is already in use")]
    DiscriminatorInUse(u32),
    #[error("session slot {0} is already in use")]
    IdInUse(SessionId),
}

impl<T> Default for SessionTable<T> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            by_discr: HashMap::new(),
            by_path: HashMap::new(),
        }
    }
}

impl<T> SessionTable<T> {
    pub fn insert(
        &mut self,
        path: PathKey,
        session: Session,
        extra: T,
    ) -> Result<SessionId, TableError> {
        let free = self.entries.iter().position(Option::is_none);
        self.insert_at(free.unwrap_or(self.entries.len()), path, session, extra)
    }

    /// [`insert`](Self::insert) at `id`, which must be free: a session
    /// handed over keeps its id, the kernel's slot for it.
    pub fn insert_at(
        &mut self,
        id: SessionId,
        path: PathKey,
        session: Session,
        extra: T,
    ) -> Result<SessionId, TableError> {
        let discr = session.config().local_discr;
        if self.by_path.contains_key(&path) {
            return Err(TableError::Duplicate(path));
        }
        if self.by_discr.contains_key(&discr) {
            return Err(TableError::DiscriminatorInUse(discr));
        }
        if self.entries.get(id).is_some_and(Option::is_some) {
            return Err(TableError::IdInUse(id));
        }
        if self.entries.len() <= id {
            self.entries.resize_with(id + 1, || None);
        }
        self.entries[id] = Some((path, session, extra));
        self.by_discr.insert(discr, id);
        self.by_path.insert(path, id);
        Ok(id)
    }

    pub fn remove(&mut self, id: SessionId) -> Option<(PathKey, Session, T)> {
        let (path, session, extra) = self.entries.get_mut(id)?.take()?;
        self.by_discr.remove(&session.config().local_discr);
        self.by_path.remove(&path);
        Some((path, session, extra))
    }

    pub fn get(&self, id: SessionId) -> Option<(&PathKey, &Session, &T)> {
        self.entries.get(id)?.as_ref().map(|(p, s, t)| (p, s, t))
    }

    pub fn get_mut(&mut self, id: SessionId) -> Option<(&PathKey, &mut Session, &mut T)> {
        self.entries
            .get_mut(id)?
            .as_mut()
            .map(|(p, s, t)| (&*p, s, t))
    }

    pub fn by_path(&self, path: &PathKey) -> Option<SessionId> {
        self.by_path.get(path).copied()
    }

    pub fn discriminator_in_use(&self, discr: u32) -> bool {
        self.by_discr.contains_key(&discr)
    }

    pub fn ids(&self) -> impl Iterator<Item = SessionId> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_some())
            .map(|(i, _)| i)
    }

    pub fn len(&self) -> usize {
        self.by_discr.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_discr.is_empty()
    }

    /// Finds the session a received packet belongs to. A non-zero Your
    /// Discriminator selects the session, which must also be the one for
    /// the packet's addresses (a discriminator guessed from elsewhere does
    /// not reach a session); zero selects by addresses.
    pub fn demux(&self, path: &PathKey, packet: &Repr) -> Result<SessionId, DropReason> {
        if packet.your_discr != 0 {
            let id = *self
                .by_discr
                .get(&packet.your_discr)
                .ok_or(DropReason::NoSession)?;
            let (session_path, _, _) = self.get(id).ok_or(DropReason::NoSession)?;
            if session_path != path {
                return Err(DropReason::NoSession);
            }
            return Ok(id);
        }
        self.by_path(path).ok_or(DropReason::NoSession)
    }
}
