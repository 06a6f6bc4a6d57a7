/**
 * Reads approval items documents from S3: once when a request is made (a missing or bad document
 * fails the request), and again each time the approval page renders (where nothing fails the
 * page: a document that is gone or changed is said to be so).
 */
import { approvalItemsView, parseApprovalItems, type ApprovalItems, type ApprovalItemsView } from '../approval.ts';
import { errorName, NotFoundError } from '../errors.ts';
import { sha256Hex } from '../json.ts';
import { logger } from '../log.ts';
import { readObjectBytes } from './aws.ts';

/**
 * The answers S3 gives for an object that is not there. AccessDenied is one of them: the
 * approval Lambdas may only GetObject under approvals/ (no ListBucket), and without
 * ListBucket S3 answers a missing key with 403 rather than 404.
 */
const MISSING_OBJECT_ERRORS: readonly string[] = ['NoSuchKey', 'NotFound', 'AccessDenied'];

/** The document of a new request and the sha256 of its bytes, which the approval binds to. */
export async function readApprovalItems(uri: string): Promise<{ document: ApprovalItems; sha256: string }> {
  let bytes: Buffer;
  try {
    bytes = await readObjectBytes(uri, 'itemsUri');
  } catch (error) {
    if (MISSING_OBJECT_ERRORS.includes(errorName(error))) {
      throw new NotFoundError(`itemsUri: the items document ${uri} could not be read (${errorName(error)}); write it before the approval gate runs`, {
        cause: error,
      });
    }
    throw error;
  }
  return { document: parseApprovalItems(bytes, uri), sha256: sha256Hex(bytes) };
}

/** What the page shows of the document now at `uri`. Never throws for S3's sake. */
export async function approvalItemsForPage(uri: string, expectedSha256: string): Promise<ApprovalItemsView> {
  try {
    return approvalItemsView(uri, expectedSha256, await readObjectBytes(uri, 'itemsUri'));
  } catch (error) {
    const name = errorName(error) || 'Error';
    if (MISSING_OBJECT_ERRORS.includes(name)) return approvalItemsView(uri, expectedSha256, undefined);
    // Throttling or an outage: the page still shows the request and its buttons; a reload may show the items.
    logger.warn('could not read the approval items document', { uri, error: name });
    return { status: 'unreadable', uri, reason: name };
  }
}
