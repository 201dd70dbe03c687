// An S3-compatible server (s3rver) started for a test (scripts/servers.mjs, shared with bench/).
export { type S3Server, startS3Server } from '../../scripts/servers.mjs';
