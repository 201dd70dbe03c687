export {
  checkRequest,
  checkTarget,
  DEFAULT_MAX_BODY_BYTES,
  type HttpOptions,
  type HttpRequest,
  type HttpResponse,
  performRequest,
  refusalOf,
} from './http.js';
export {
  type Command,
  cleanEnvironment,
  DEFAULT_MAX_OUTPUT_BYTES,
  ENVIRONMENT_ALLOW_LIST,
  type RunOptions,
  type RunResult,
  runProcess,
} from './process.js';
export {
  bwrapArgs,
  createSandbox,
  probeBwrap,
  SANDBOX_UID,
  type Sandbox,
  type SandboxBackend,
  type SandboxOptions,
  type SandboxUser,
  sandboxUserFor,
} from './sandbox.js';
