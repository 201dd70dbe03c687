export {
  checkRequest,
  checkTarget,
  type HttpOptions,
  type HttpRequest,
  type HttpResponse,
  performRequest,
  refusalOf,
} from './http.js';
export {
  type Command,
  cleanEnvironment,
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
