export {
  formatVerification,
  parseVerdict,
  runVerifier,
  type Verdict,
  type VerificationResult,
  type VerificationStatus,
  type VerifierConfig,
  type VerifierOutput,
} from './verifier.js';
