-- Media retirement (#38): when a work's media changes to other bytes, or
-- the work is gone, its old sha256 is retired once no active work names
-- it, and researchers discard what they derived from it. The check looks
-- a sha256 up among active works: indexed, not a scan of the archive.
CREATE INDEX episodes_active_media ON research.episodes (media_sha256) WHERE active AND media_sha256 <> '';
CREATE INDEX clips_active_media ON research.clips (media_sha256) WHERE active AND media_sha256 <> '';
