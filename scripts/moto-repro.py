#!/usr/bin/env python3
"""Reproduces two defects of moto_server (5.2.1) that `jobstream run` meets
(scripts/moto-server.py works around both):

1. a cancelled TransactWriteItems leaves earlier shard iterators of the
   table's stream reading a discarded copy: no new record, ever;
2. concurrent TransactWriteItems and writes on one table: 500s
   (`dictionary changed size during iteration`).

    scripts/moto-repro.py http://127.0.0.1:PORT
"""
import boto3, sys, threading, botocore
ep = sys.argv[1]
d = boto3.client('dynamodb', endpoint_url=ep, region_name='us-east-1', aws_access_key_id='x', aws_secret_access_key='x')
s = boto3.client('dynamodbstreams', endpoint_url=ep, region_name='us-east-1', aws_access_key_id='x', aws_secret_access_key='x')
t = 'repro-iter'
d.create_table(TableName=t, AttributeDefinitions=[{'AttributeName': 'k', 'AttributeType': 'S'}],
               KeySchema=[{'AttributeName': 'k', 'KeyType': 'HASH'}], BillingMode='PAY_PER_REQUEST',
               StreamSpecification={'StreamEnabled': True, 'StreamViewType': 'NEW_AND_OLD_IMAGES'})
arn = d.describe_table(TableName=t)['Table']['LatestStreamArn']
shard = s.describe_stream(StreamArn=arn)['StreamDescription']['Shards'][0]['ShardId']
d.put_item(TableName=t, Item={'k': {'S': 'a'}})
it = s.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType='TRIM_HORIZON')['ShardIterator']
r = s.get_records(ShardIterator=it); it = r['NextShardIterator']
print('first read:', len(r['Records']), 'record(s)')
try:  # a transaction cancelled by its condition, as DynamoDB cancels them
    d.transact_write_items(TransactItems=[{'Put': {'TableName': t, 'Item': {'k': {'S': 'a'}},
                                                    'ConditionExpression': 'attribute_not_exists(k)'}}])
except d.exceptions.TransactionCanceledException:
    print('transaction cancelled (expected)')
d.put_item(TableName=t, Item={'k': {'S': 'b'}})
r = s.get_records(ShardIterator=it)
print('same iterator after the put of b:', len(r['Records']), 'record(s) (DynamoDB: 1)')
it2 = s.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType='TRIM_HORIZON')['ShardIterator']
print('a fresh TRIM_HORIZON iterator:', len(s.get_records(ShardIterator=it2)['Records']), 'record(s) (2)')

# 2. Transactions beside puts, on threads (each thread its own client).
d.create_table(TableName='repro-race', AttributeDefinitions=[{'AttributeName': 'k', 'AttributeType': 'S'}],
               KeySchema=[{'AttributeName': 'k', 'KeyType': 'HASH'}], BillingMode='PAY_PER_REQUEST')
for i in range(300):
    d.put_item(TableName='repro-race', Item={'k': {'S': f'seed{i}'}})
errors = []
cfg = botocore.config.Config(retries={'max_attempts': 1})
def work(n):
    c = boto3.client('dynamodb', endpoint_url=ep, region_name='us-east-1', aws_access_key_id='x',
                     aws_secret_access_key='x', config=cfg)
    for i in range(40):
        try:
            if n % 2:
                c.transact_write_items(TransactItems=[{'Put': {'TableName': 'repro-race', 'Item': {'k': {'S': f't{n}-{i}'}}}}])
            else:
                c.put_item(TableName='repro-race', Item={'k': {'S': f'p{n}-{i}'}})
        except botocore.exceptions.ClientError as e:
            errors.append(e.response['Error'].get('Code'))
threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
[t.start() for t in threads]; [t.join() for t in threads]
print('concurrent writes answered with errors:', len(errors), sorted(set(errors)), '(DynamoDB: 0)')
