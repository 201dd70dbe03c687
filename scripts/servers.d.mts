/** A PostgreSQL server started by {@link startPostgres}. */
export interface PostgresServer {
  /** A URL with the superuser's name and password. */
  url: string;
  /** The same server with a wrong password. */
  wrongPasswordUrl: string;
  /** Stops the server and starts it again on the same port (a restart mid-session). */
  restart(): void;
  stop(): Promise<void>;
}
export function startPostgres(options?: { durable?: boolean }): Promise<PostgresServer>;

/** An S3-compatible server started by {@link startS3Server}. */
export interface S3Server {
  endpoint: string;
  bucket: string;
  /** Where s3rver keeps the objects, to damage one as a disk or a person would. */
  directory: string;
  /** The client configuration that reaches it with its credentials. */
  client: Record<string, unknown>;
  /** The same as environment variables: endpoint, region, credentials (the SDK's standard way). */
  environment: Record<string, string>;
  /** Stops it and starts it again on the same port, its objects kept (a process server only). */
  restart(): Promise<void>;
  close(): Promise<void>;
}
export function startS3Server(bucket?: string, options?: { process?: boolean }): Promise<S3Server>;
