// PostgreSQL from Debian's package, started for a test (scripts/servers.mjs, shared with bench/).
export { type PostgresServer, startPostgres } from '../../scripts/servers.mjs';
