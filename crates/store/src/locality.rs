//! Whether the state directory's reads can hang: the one fact that decides
//! where a poll's reads run. On a disk-backed or memory filesystem the
//! kernel answers a `stat` or a 1 KiB read from its caches or the disk, in
//! the disk's time; on a network filesystem (NFS, GlusterFS's FUSE mount,
//! SMB, Ceph, 9p) the same call waits for as long as the server is gone.
//!
//! Invariants: only a filesystem named here as local is local; one this
//! crate does not know, or one `statfs(2)` cannot name, is taken to be able
//! to hang, so the answer errs towards the blocking pool. Every directory a
//! poll reads is asked, not only the state directory: a subdirectory may be
//! another mount, or a link to one.

use std::path::Path;

/// `statfs(2)`'s `f_type` of the filesystems whose reads end in the disk's
/// time (`linux/magic.h`; ZFS's from OpenZFS).
const LOCAL: [(u32, &str); 10] = [
    (0xEF53, "ext2/3/4"),
    (0x5846_5342, "xfs"),
    (0x9123_683E, "btrfs"),
    (0x0102_1994, "tmpfs"),
    (0x8584_58F6, "ramfs"),
    (0xF2F5_2010, "f2fs"),
    (0x2FC1_2FC1, "zfs"),
    (0x794C_7630, "overlayfs"),
    (0x3153_464A, "jfs"),
    (0x5265_4973, "reiserfs"),
];

/// Whether every one of `dirs` is on a local filesystem. Asked on the
/// blocking pool: `statfs` itself can hang on a network mount.
pub(crate) fn all_local<'a>(dirs: impl IntoIterator<Item = &'a Path>) -> bool {
    dirs.into_iter().all(|dir| {
        rustix::fs::statfs(dir).is_ok_and(|fs| {
            // `f_type`'s width and sign differ between targets; the magic numbers are 32 bits.
            #[allow(clippy::unnecessary_cast)]
            let kind = fs.f_type as u32;
            LOCAL.iter().any(|(magic, _)| *magic == kind)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_not_local() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!all_local([dir.path().join("gone").as_path()]));
    }

    #[test]
    fn proc_is_not_local() {
        // procfs is no disk: not named, so taken to be able to hang.
        assert!(!all_local([Path::new("/proc")]));
    }

    #[test]
    fn dev_shm_is_local() {
        // tmpfs on every Linux this runs on.
        assert!(all_local([Path::new("/dev/shm")]));
    }
}
